"""What never reaches a file, a log or a screen: redaction rules and the one scrubber."""
