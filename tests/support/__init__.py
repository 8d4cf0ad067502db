"""Test support: loopback Slack stubs and helpers shared by the suites."""
