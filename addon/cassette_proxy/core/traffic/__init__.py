"""What a request is besides a model call (telemetry, token exchanges, browser background), and which test it belongs to."""
