"""The flow's steps: plain functions (testable without Prefect), wrapped as tasks in flows/."""
