"""Paper-vs-measured report from the MLflow store: ``python -m analysis [--root DIR] [--out DIR]``.

Reads runs only (``mlflow.search_runs`` and the runs' ``summary.json`` artifacts), never trains.
Runs are matched to paper rows by their tags (``paper``, ``table``/``figure``, ``case``, ``scale``,
``seed``); per table it writes Markdown and HTML with the paper's numbers beside ours
(mean ± std over seeds), plots, and a claims checklist; ``index.html`` lists every table of the
five papers with its status. Deterministic: the same store gives byte-identical Markdown.
It is a top-level folder of the repository (not installed): run it from the repository root.
"""
