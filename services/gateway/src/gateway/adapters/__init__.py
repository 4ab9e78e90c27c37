"""The gateway's adapters: its projection tables, the owners' internal APIs, Redis notifications."""
