"""Fuzzing the readers of response bodies: the case generators (:mod:`.cases`) and their seeds,
shared by ``tests/test_fuzz.py`` and ``benchmarks/fuzz.py``.

``seeds/countries.json`` and ``seeds/news.json`` are the sandbox catalogue's countries and news
answers as served in JSON (the first 6 and 4 records), frozen here so the cases do not move
when the sandbox does; the other seeds are the recorded real answers in ``tests/data/``.
"""
