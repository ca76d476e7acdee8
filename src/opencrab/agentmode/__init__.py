"""Agent mode (seed 004): a request becomes a task DAG run by coding CLIs.

model (the seed's structs and JSON), validation (its rules), states (its state
machines), files (one JSON file per session), planner (the master agent's plan),
service (create, list, edit sessions; keep the database index in step).
"""
