"""Analyses over finished runs (MLflow metric histories): AGN temporal efficiency (Eq 4)."""
