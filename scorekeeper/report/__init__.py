"""The report: report.md, report.html (templates/report.html.j2, inline SVG from plots.py) and the
completion record, rendered from a run's MetricsDocument. Pure functions, no Prefect: the report
step (tasks/report.py) publishes them and the Prefect artifacts."""
