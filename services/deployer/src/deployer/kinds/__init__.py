"""The deployer's proposal kinds."""
