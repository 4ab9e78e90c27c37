"""The routines service: owns the routine kind (routines of agents, their timing and pause, a guild's switch) and
the scheduler that wakes agents."""
