"""Tickets (seed 002): the state machine, and the operations the REST API and the
scheduler run on a ticket, its steps and its sessions."""
