"""Consuming: subscriptions and their marks, the exclusive consumer with its lease, and doorbells."""
