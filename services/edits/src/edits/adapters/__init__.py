"""The edits service's adapters: its PostgreSQL tables and the queries over them."""
