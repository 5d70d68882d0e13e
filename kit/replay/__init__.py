"""Replaying recorded arrivals as a streaming operator would see them (layer 4, the driver).

``interleave``: two streams merged into the one arrival order a two-input operator (a join)
sees, with the operator's watermark at every position.
"""
