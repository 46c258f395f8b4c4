"""Measurements outside the engines: process-tree memory and page-cache residency."""
