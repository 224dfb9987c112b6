"""Sending recorded requests live again: drift's classification, its report, the credentials it sends."""
