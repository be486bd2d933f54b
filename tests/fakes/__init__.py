"""Fakes the tests run against: model APIs on loopback that real agent CLIs talk to."""
