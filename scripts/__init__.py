"""The repository's own tools (not installed with the package): the docs' references."""
