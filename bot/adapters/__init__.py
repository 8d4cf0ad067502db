"""Adapters: the only modules that talk to libraries with I/O (kubernetes, slack_sdk, sqlalchemy, apscheduler)."""
