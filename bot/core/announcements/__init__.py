"""Announcements and maintenance windows: what is posted to the company, and when it may happen.

timing      offsets, dedup keys, and what lateness means for one announcement (pure)
windows     the allowed weekly windows and the freezes (pure)
templates   the announcement templates, their context and Slack's size limits
overrides   refusing a window, the coordinator's override, and its audit entry
service     scheduling, firing and moving announcements against the store
"""
