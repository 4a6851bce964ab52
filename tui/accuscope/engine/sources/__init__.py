"""What accuscope reads: every dump format (a reader each), the registry that detects them by content, layouts, and `Side`, the one face every source shows on either side of a comparison."""
