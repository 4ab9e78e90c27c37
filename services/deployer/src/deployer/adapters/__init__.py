"""The deployer's adapters: its tables and queries, git repositories on disk, the formats' schemas."""
