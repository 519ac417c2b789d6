"""Hooks that make other frameworks write rcdiag's dump without a change to their users' code."""
