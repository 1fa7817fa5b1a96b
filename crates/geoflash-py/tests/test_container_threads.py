"""``geoflash.RtreeContainer`` from several threads (found by a review:
a query while another thread deleted raised ``KeyError``, thousands of
times a run, and two threads inserting the same object lost counts, so
that deleting every entry then raised ``IndexError`` with entries left)."""

import sys
import threading

import geoflash


def _run(*targets):
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_queries_while_another_thread_inserts_and_deletes_give_the_objects():
    things = [object() for _ in range(2000)]
    c = geoflash.RtreeContainer()
    errors, done = [], threading.Event()

    def churn():
        for _ in range(10):
            for t in things:
                c.insert(t, (0, 0, 1, 1))
            for t in things:
                c.delete(t, (0, 0, 1, 1))
        done.set()

    def reader():
        while not done.is_set():
            try:
                found = list(c.intersection((0, 0, 1, 1)))
                assert len({id(t) for t in found}) == len(found)
                items = list(c.intersection((0, 0, 1, 1), bbox=True))
                assert all(it.id is None and it.object is not None for it in items)
                c.leaves()
            except Exception as e:  # every error fails the test
                errors.append(repr(e))

    _run(churn, reader)
    assert errors == []
    assert len(c) == 0 and list(c.intersection((0, 0, 1, 1))) == []


def test_two_threads_inserting_one_object_count_every_entry():
    thing = object()
    c = geoflash.RtreeContainer()
    barrier = threading.Barrier(2)

    def inserter():
        barrier.wait()
        for _ in range(5000):
            c.insert(thing, (0, 0, 1, 1))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # more thread switches: the race shows
    try:
        _run(inserter, inserter)
    finally:
        sys.setswitchinterval(switch)
    assert len(c) == 10000
    for _ in range(10000):
        c.delete(thing, (0, 0, 1, 1))
    assert len(c) == 0 and thing not in c and c.get_size() == 0
