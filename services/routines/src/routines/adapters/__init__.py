"""The routines service's tables and the queries over them."""
