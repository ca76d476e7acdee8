"""Gateways: how messages reach agents and replies leave them (seed 001 "Gateway Trait")."""
