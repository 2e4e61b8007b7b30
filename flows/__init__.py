"""The Prefect flows: the order of the steps and nothing else.

They import Prefect, the tasks and the library; installed as `scorekeeper.flows`.
"""
