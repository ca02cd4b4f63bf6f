# SPDX-License-Identifier: Apache-2.0
"""A worked example service on gpum, after seed 003's "AlphaPulse" GPU service.

- pulse.ops: its market operations in PyTorch (returns, EMA, RSI, MACD, Bollinger bands, Monte
  Carlo price paths, mean-variance weights), on whatever device the tensors are on;
- pulse.models: its four models (linear, MLP, LSTM, a small transformer encoder) and their
  training through gpum's adaptive loader;
- pulse.service: the service, under a gpum reservation sized by the estimator, serving the
  models through gpum.BatchProcessor, profiled with gpum.profile and gpum.benchmark.

Import torch only through these modules after the reservation is granted when CUDA is to be
used: pulse.service does so (see examples/service/README.md).
"""
