"""A persistent privacy budget: a store of declared totals per protected source and privacy
unit, append-only hash-chained bookings, and the filters that decide whether one more booking
fits (``rules``), on SQLite or PostgreSQL (``backend``, ``schema``, ``store``); the certified
spend so far of each rule (``odometer``) and per-record accounting (``individual``)."""
