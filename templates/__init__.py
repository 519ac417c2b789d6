"""The jinja2 templates, CSS and JavaScript of the HTML report (package data: rcdiag.templates)."""
