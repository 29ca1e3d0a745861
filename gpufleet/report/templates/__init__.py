"""Jinja2 templates of the HTML fleet report (gpufleet.report.html renders them)."""
