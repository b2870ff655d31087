"""Third-party shapes, vendored as small fixtures (issue 41): code written after the patterns of projects nobody
here wrote, used as they are."""
