"""The access service: owns the sample kind (its tools, its rules, its table)."""
