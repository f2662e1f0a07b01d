"""Core abstractions: mechanism events, adjacency, composition graphs, plugin hooks."""
