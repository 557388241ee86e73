"""Performance-critical ops: each folder holds the public function with device
dispatch (`__init__.py`), its PyTorch reference (`reference.py`) and, where
one exists, a Triton kernel (`triton.py`); C++ kernels live in `csrc/<op>.cpp`.
"""
