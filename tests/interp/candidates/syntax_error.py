"""Adversarial: a syntax error on line 6."""

import torch


def broken(x:
    return x
