"""Synthetic sample traces for midtrace, made by ``generate.py`` with a fixed seed."""
