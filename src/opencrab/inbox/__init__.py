"""Telling a person that something waits in the inbox: the notifier and its signed webhook."""
