"""Tests of hvd.elastic (python/accelkit/torch/elastic.py) in one process, without a
launcher: ElasticSampler's split of a dataset over ranks (size and rank patched), the
save / restore / sync of ObjectState and TorchState on real torch modules and optimizers,
commit()'s host check and run()'s loop, with the launcher's answers (ak_elastic_status,
ak_elastic_hosts_changed) and the runtime reset (shutdown, init) replaced by fakes.
hvd.init() without a launcher gives a real world of one for the collectives. Needs torch;
skipped without it or when the library was built without the training runtime.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        python3 -m unittest -v tests/python/test_elastic_state.py
"""
import contextlib
import unittest
import warnings
from unittest import mock

import test_horovod

torch = test_horovod.torch  # None without torch: setUpModule skips


def setUpModule():
    test_horovod.setUpModule()  # skips without torch or the training runtime
    global hvd, elastic, mpi_ops, functions, C
    import accelkit.torch as hvd
    from accelkit.torch import elastic, functions, mpi_ops
    from accelkit.torch._ctypes_train import C
    hvd.init()  # no launcher: a world of one


def tearDownModule():
    if torch is not None:
        hvd.shutdown()


# ---- fakes ------------------------------------------------------------------------------

_MISSING = object()


@contextlib.contextmanager
def c_functions(**fakes):
    """Replaces the lazily declared C functions (the real symbols may not exist yet)."""
    table = vars(C)
    saved = {k: table.get(k, _MISSING) for k in fakes}
    table.update(fakes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is _MISSING:
                table.pop(k, None)
            else:
                table[k] = v


def status(enabled=1, removed=0):
    def fake(p_enabled, p_round, p_removed):
        p_enabled[0], p_round[0], p_removed[0] = enabled, 0, removed
        return 0
    return fake


def hosts_changed(changed, removed_only, result=0, calls=None):
    def fake(p_changed, p_removed_only):
        if calls is not None:
            calls.append(1)
        p_changed[0], p_removed_only[0] = changed, removed_only
        return result
    return fake


def never_called(*args):
    raise AssertionError("asked the launcher outside an elastic job")


@contextlib.contextmanager
def world(size, rank):
    with mock.patch.object(mpi_ops, "size", lambda: size), \
            mock.patch.object(mpi_ops, "rank", lambda: rank), \
            mock.patch.object(mpi_ops, "is_initialized", lambda: True):
        yield


def samplers(n, size, **kw):
    """One ElasticSampler per rank of a world of `size` over range(n)."""
    out = []
    for r in range(size):
        with world(size, r):
            out.append(elastic.ElasticSampler(list(range(n)), **kw))
    return out


def order(n, seed, epoch=0):
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return torch.randperm(n, generator=g).tolist()


# ---- ElasticSampler ---------------------------------------------------------------------

class TestElasticSampler(unittest.TestCase):
    def test_two_replicas_split_the_dataset(self):
        s0, s1 = samplers(10, 2, seed=3)
        self.assertEqual((len(s0), len(s1)), (5, 5))
        self.assertFalse(set(s0) & set(s1))
        self.assertEqual(sorted(list(s0) + list(s1)), list(range(10)))
        o = order(10, 3)
        self.assertEqual(list(s0), o[0::2])
        self.assertEqual(list(s1), o[1::2])

    def test_three_replicas_pad_by_repeating_the_start(self):
        ss = samplers(10, 3, seed=1)
        self.assertEqual([len(s) for s in ss], [4, 4, 4])
        o = order(10, 1)
        padded = o + o[:2]
        for r, s in enumerate(ss):
            self.assertEqual(list(s), padded[r::3])
            self.assertEqual(s.total_size, 12)
        self.assertEqual(set().union(*map(set, ss)), set(range(10)))

    def test_no_shuffle_is_in_order(self):
        s0, s1 = samplers(7, 2, shuffle=False)
        self.assertEqual(list(s0), [0, 2, 4, 6])
        self.assertEqual(list(s1), [1, 3, 5, 0])

    def test_order_is_deterministic_per_epoch(self):
        a, = samplers(50, 1, seed=5)
        b, = samplers(50, 1, seed=5)
        c, = samplers(50, 1, seed=6)
        self.assertEqual(list(a), list(b))
        self.assertNotEqual(list(a), list(c))
        first = list(a)
        with world(1, 0):
            a.set_epoch(1)
        self.assertNotEqual(list(a), first)
        self.assertEqual(list(a), order(50, 5, 1))
        with world(1, 0):
            a.set_epoch(0)
        self.assertEqual(list(a), first)

    def test_processed_indices_left_out_after_load(self):
        s0, s1 = samplers(10, 2, seed=2)
        s0.record_batch(0, 3)
        s1.record_batch(0, 3)
        done = set(s0.get_indices(0, 3)) | set(s1.get_indices(0, 3))
        self.assertEqual(len(done), 6)
        state = s0.state_dict()
        state["processed_indices"] |= s1.processed_indices
        state["epoch"] = 4
        ss = samplers(10, 3)
        for r, s in enumerate(ss):
            with world(3, r):
                s.load_state_dict(state)
        self.assertEqual(ss[0].epoch, 4)
        self.assertEqual([len(s) for s in ss], [2, 2, 2])  # 4 left over 3 ranks
        got = set().union(*map(set, ss))
        self.assertEqual(got, set(range(10)) - done)
        # the left-over indices keep the epoch's order
        self.assertEqual(ss[0].remaining_indices,
                         [i for i in order(10, 0, 4) if i not in done])

    def test_set_epoch_clears_processed(self):
        s, = samplers(8, 1)
        s.record_indices(torch.tensor([1, 2]))
        self.assertEqual(s.processed_indices, {1, 2})
        with world(1, 0):
            s.load_state_dict(s.state_dict())
        self.assertEqual(len(s), 6)
        with world(1, 0):
            s.set_epoch(1)
        self.assertEqual((s.processed_indices, len(s)), (set(), 8))

    def test_few_left_still_give_every_rank_a_sample(self):
        ss = samplers(10, 3)
        for r, s in enumerate(ss):
            with world(3, r):
                s.load_state_dict({"epoch": 0, "processed_indices": set(range(9))})
        self.assertEqual([list(s) for s in ss], [[9], [9], [9]])
        for r, s in enumerate(ss):
            with world(3, r):
                s.load_state_dict({"epoch": 0, "processed_indices": set(range(10))})
        self.assertEqual([len(s) for s in ss], [0, 0, 0])
        self.assertEqual(list(ss[0]), [])

    def test_batches_and_data_loader(self):
        s0, _ = samplers(10, 2, shuffle=False)
        self.assertEqual(s0.get_indices(1, 3), [6, 8])  # the short last batch
        self.assertEqual(s0.get_indices(2, 3), [])
        loader = torch.utils.data.DataLoader(list(range(100, 110)), batch_size=2, sampler=s0)
        self.assertEqual([b.tolist() for b in loader], [[100, 102], [104, 106], [108]])

    def test_needs_init(self):
        with mock.patch.object(mpi_ops, "is_initialized", lambda: False):
            with self.assertRaisesRegex(ValueError, "hvd.init"):
                elastic.ElasticSampler(range(4))

    def test_world_of_one_after_init(self):
        s = elastic.ElasticSampler(range(5))
        self.assertEqual((s.num_replicas, s.rank, len(s)), (1, 0, 5))


# ---- states -----------------------------------------------------------------------------

def identity(obj):
    return obj


def rank0():
    return 0


class TestObjectState(unittest.TestCase):
    def test_save_mutate_restore(self):
        st = elastic.ObjectState(identity, rank0, epoch=0, hist=[1])
        st.epoch = 3
        st.hist.append(2)
        st.save()
        st.epoch = 4
        st.hist.append(5)
        st.extra = "not part of the state"
        st.restore()
        self.assertEqual((st.epoch, st.hist), (3, [1, 2]))
        st.hist.append(9)  # changing the restored value leaves the snapshot alone
        st.restore()
        self.assertEqual(st.hist, [1, 2])
        self.assertNotIn("extra", st._saved_state)

    def test_restore_before_any_commit_gives_the_constructor_values(self):
        hist = [1]
        st = elastic.ObjectState(identity, rank0, hist=hist)
        hist.append(2)
        st.restore()
        self.assertEqual(st.hist, [1])

    def test_sync_takes_rank0_saved_values(self):
        sent = []

        def bcast(obj):
            sent.append(dict(obj))
            return {"epoch": 7}  # rank 0's

        st = elastic.ObjectState(bcast, rank0, epoch=1)
        st.epoch = 2  # uncommitted: dropped by sync
        st.sync()
        self.assertEqual(sent, [{"epoch": 1}])
        self.assertEqual(st.epoch, 7)

    def test_reset_callbacks_in_order(self):
        st = elastic.ObjectState(identity, rank0)
        calls = []
        st.register_reset_callbacks([lambda: calls.append(1), lambda: calls.append(2)])
        st.register_reset_callbacks([lambda: calls.append(3)])
        st.on_reset()
        self.assertEqual(calls, [1, 2, 3])


def model_and_adam():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    step(model, opt)
    return model, opt


def step(model, opt):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).sum().backward()
    opt.step()


def snapshot(model, opt):
    params = {k: v.clone() for k, v in model.state_dict().items()}
    exp_avg = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
    return params, exp_avg


class TestTorchState(unittest.TestCase):
    def assertSnapshot(self, model, opt, snap):
        params, exp_avg = snapshot(model, opt)
        for k, v in snap[0].items():
            self.assertTrue(torch.equal(params[k], v), k)
        for a, b in zip(exp_avg, snap[1]):
            self.assertTrue(torch.equal(a, b))

    def test_save_mutate_restore(self):
        model, opt = model_and_adam()
        st = elastic.TorchState(model=model, optimizer=opt, epoch=0, batch=0)
        self.assertIs(st.model, model)
        self.assertIs(st.optimizer, opt)
        st.epoch, st.batch = 2, 5
        with c_functions(ak_elastic_status=status(enabled=0),
                         ak_elastic_hosts_changed=never_called):
            st.commit()
        snap = snapshot(model, opt)
        step(model, opt)
        st.epoch = 3
        self.assertFalse(torch.equal(snapshot(model, opt)[1][0], snap[1][0]))
        st.restore()
        self.assertSnapshot(model, opt, snap)
        self.assertEqual((st.epoch, st.batch), (2, 5))
        step(model, opt)  # stepping after a restore leaves the snapshot alone
        st.restore()
        self.assertSnapshot(model, opt, snap)

    def test_any_keyword_and_reassignment(self):
        model, opt = model_and_adam()
        sampler = elastic.ElasticSampler(range(6))
        st = elastic.TorchState(net=model, opt=opt, sampler=sampler, epoch=1)
        self.assertEqual(set(st._handlers), {"net", "opt", "sampler"})
        self.assertIsNone(st.model)
        sampler.record_indices([0, 1])
        st.save()
        sampler.record_indices([2])
        st.restore()
        self.assertEqual(sampler.processed_indices, {0, 1})
        self.assertEqual(len(sampler), 4)
        other = torch.nn.Linear(4, 3)
        st.model = None  # a plain value stays one
        st.net = other
        self.assertIs(st.net, other)
        st.save()
        w = other.weight.detach().clone()
        with torch.no_grad():
            other.weight.add_(1.0)
        st.restore()
        self.assertTrue(torch.equal(other.weight, w))

    def test_sync_in_a_world_of_one_keeps_values(self):
        model, opt = model_and_adam()
        sampler = elastic.ElasticSampler(range(10))
        sampler.record_batch(0, 4)
        st = elastic.TorchState(model=model, optimizer=opt, sampler=sampler, epoch=0)
        st.epoch = 5
        st.save()
        st.epoch = 6  # uncommitted
        snap = snapshot(model, opt)
        st.sync()
        self.assertSnapshot(model, opt, snap)
        self.assertEqual(st.epoch, 5)
        self.assertEqual(len(sampler.processed_indices), 4)
        self.assertEqual(len(sampler), 6)
        # sync saved what it synced: a restore now gives the same values
        step(model, opt)
        st.restore()
        self.assertSnapshot(model, opt, snap)


class TestHostCheck(unittest.TestCase):
    def state(self):
        return elastic.TorchState(model=torch.nn.Linear(2, 2), epoch=0)

    def test_changed_raises_with_skip_sync(self):
        for removed_only in (1, 0):
            st = self.state()
            st.epoch = 4
            with c_functions(ak_elastic_status=status(),
                             ak_elastic_hosts_changed=hosts_changed(1, removed_only)):
                with self.assertRaises(mpi_ops.HostsUpdatedInterrupt) as cm:
                    st.commit()
            self.assertIs(cm.exception.skip_sync, bool(removed_only))
            st.epoch = 9
            st.restore()  # commit saved before it checked
            self.assertEqual(st.epoch, 4)

    def test_unchanged_or_failed_query_does_not_raise(self):
        st = self.state()
        calls = []
        with c_functions(ak_elastic_status=status(),
                         ak_elastic_hosts_changed=hosts_changed(0, 0, calls=calls)):
            st.commit()
        self.assertEqual(calls, [1])
        with c_functions(ak_elastic_status=status(),
                         ak_elastic_hosts_changed=hosts_changed(1, 0, result=5)):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                st.commit()
        self.assertTrue(any("launcher" in str(x.message) for x in w))

    def test_not_elastic_asks_nothing(self):
        st = self.state()
        with c_functions(ak_elastic_status=status(enabled=0),
                         ak_elastic_hosts_changed=never_called):
            st.commit()

    def test_library_without_elastic_is_not_elastic(self):
        class Missing:
            def __getattr__(self, name):
                raise ImportError(name)

        with mock.patch.object(elastic, "C", Missing()):
            self.assertFalse(elastic._elastic_enabled())
            self.state().commit()


# ---- run --------------------------------------------------------------------------------

def Recorder(log):
    """An ObjectState (value=0) that logs its sync, restore and _sync_after_removal."""
    class _Recorder(elastic.ObjectState):
        def sync(self):
            log.append("sync")
            super().sync()

        def restore(self):
            log.append("restore")
            super().restore()

        def _sync_after_removal(self):
            log.append("sync_after_removal")

    return _Recorder(identity, rank0, value=0)


@contextlib.contextmanager
def elastic_job(log, enabled=1, init=None):
    """An elastic job whose runtime reset only logs (the real world of one stays up)."""
    def fake_init():
        log.append("init")
        if init:
            init()

    with c_functions(ak_elastic_status=status(enabled=enabled)), \
            mock.patch.object(mpi_ops, "shutdown", lambda: log.append("shutdown")), \
            mock.patch.object(mpi_ops, "init", fake_init):
        yield


def failing_once(log, error):
    @elastic.run
    def train(state, a, b=None):
        log.append("func")
        if log.count("func") == 1:
            state.value = 5  # uncommitted
            raise error
        return ("done", a, b, state.value)
    return train


class TestRun(unittest.TestCase):
    def test_internal_error_restores_resets_and_returns(self):
        log = []
        st = Recorder(log)
        st.register_reset_callbacks([lambda: log.append("callback")])
        train = failing_once(log, mpi_ops.HorovodInternalError("peer lost"))
        with elastic_job(log):
            self.assertEqual(train(st, 1, b=2), ("done", 1, 2, 0))
        self.assertEqual(log, ["sync", "func", "restore", "shutdown", "init", "callback",
                               "sync", "func"])

    def test_hosts_updated_skip_sync(self):
        log = []
        st = Recorder(log)
        train = failing_once(log, mpi_ops.HostsUpdatedInterrupt(skip_sync=True))
        with elastic_job(log):
            self.assertEqual(train(st, 1)[0], "done")
        self.assertEqual(log, ["sync", "func", "shutdown", "init", "sync_after_removal",
                               "func"])

    def test_hosts_updated_with_sync(self):
        log = []
        st = Recorder(log)
        train = failing_once(log, mpi_ops.HostsUpdatedInterrupt(skip_sync=False))
        with elastic_job(log):
            train(st, 1)
        self.assertEqual(log, ["sync", "func", "shutdown", "init", "sync", "func"])

    def test_not_elastic_raises_after_restoring(self):
        log = []
        st = Recorder(log)
        train = failing_once(log, mpi_ops.HorovodInternalError("peer lost", status=5))
        with elastic_job(log, enabled=0):
            with self.assertRaisesRegex(mpi_ops.HorovodInternalError,
                                        "peer lost.*not an elastic job") as cm:
                train(st, 1)
        self.assertEqual(cm.exception.status, 5)
        self.assertEqual(log, ["sync", "func", "restore"])
        self.assertEqual(st.value, 0)
        log.clear()
        train = failing_once(log, mpi_ops.HostsUpdatedInterrupt(skip_sync=True))
        with elastic_job(log, enabled=0):
            with self.assertRaises(mpi_ops.HostsUpdatedInterrupt):
                train(st, 1)
        self.assertNotIn("shutdown", log)

    def test_removed_worker_exits_with_zero(self):
        def refused():
            raise mpi_ops.HorovodInternalError("removed from the job")

        log = []
        train = failing_once(log, mpi_ops.HostsUpdatedInterrupt(skip_sync=True))
        with elastic_job(log, init=refused), \
                c_functions(ak_elastic_status=status(enabled=1, removed=1)):
            with self.assertRaises(SystemExit) as cm:
                train(Recorder(log), 1)
        self.assertEqual(cm.exception.code, 0)
        log.clear()
        with elastic_job(log, init=refused):  # a failed init that is not a removal
            with self.assertRaisesRegex(mpi_ops.HorovodInternalError, "removed"):
                train(Recorder(log), 1)

    def test_torch_state_rolls_back_to_the_commit(self):
        model, opt = model_and_adam()
        sampler = elastic.ElasticSampler(range(12))
        st = elastic.TorchState(model=model, optimizer=opt, sampler=sampler, epoch=0)
        calls, log = [], []

        @elastic.run
        def train(state):
            calls.append(1)
            if len(calls) == 1:
                state.sampler.record_batch(0, 4)
                state.epoch = 1
                state.commit()
                snap.append(snapshot(state.model, state.optimizer))
                step(state.model, state.optimizer)
                state.sampler.record_batch(1, 4)
                raise mpi_ops.HorovodInternalError("peer lost")
            return state.epoch, len(state.sampler)

        snap = []
        with elastic_job(log), c_functions(ak_elastic_hosts_changed=hosts_changed(0, 0)):
            self.assertEqual(train(st), (1, 8))
        TestTorchState.assertSnapshot(self, model, opt, snap[0])

    def test_skip_sync_still_resplits_samplers(self):
        model = torch.nn.Linear(2, 2)
        sampler = elastic.ElasticSampler(range(10))
        st = elastic.TorchState(model=model, sampler=sampler)
        log = []

        @elastic.run
        def train(state):
            log.append("func")
            if log.count("func") == 1:
                state.sampler.record_batch(0, 4)
                state.commit()
            return len(state.sampler)

        resets = []
        real_reset = sampler.reset
        with elastic_job(log), \
                c_functions(ak_elastic_hosts_changed=hosts_changed(1, 1)), \
                mock.patch.object(functions, "broadcast_parameters",
                                  wraps=functions.broadcast_parameters) as bp, \
                mock.patch.object(sampler, "reset",
                                  lambda: (resets.append(1), real_reset())):
            self.assertEqual(train(st), 6)
        self.assertEqual(bp.call_count, 1)  # the first sync only
        self.assertEqual(len(resets), 2)  # the first sync, then the one after the removal


class TestOptimizersAcrossAReset(unittest.TestCase):
    """A reset (shutdown, init) between backward() and step(): the optimizers must drop
    the old runtime's handles (now unknown) and reduce the gradients afresh."""

    def backward_then_reset(self, make_optimizer):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        with mock.patch.dict("os.environ", {"HOROVOD_ELASTIC": "1"}):  # hooks on one rank
            opt = make_optimizer(model)
        model(torch.ones(2, 4)).sum().backward()  # the hooks start allreduces
        hvd.shutdown()
        hvd.init()
        before = [p.detach().clone() for p in model.parameters()]
        opt.step()
        return before, list(model.parameters())

    def test_distributed_optimizer(self):
        before, after = self.backward_then_reset(lambda m: hvd.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.5), named_parameters=m.named_parameters()))
        for b, p in zip(before, after):
            self.assertTrue(torch.allclose(p.detach(), b - 0.5 * p.grad), "one SGD step")

    def test_adasum_optimizer(self):
        # built directly: DistributedOptimizer(op=Adasum) on one rank is plain averaging
        from accelkit.torch.adasum import make_adasum_optimizer
        before, after = self.backward_then_reset(lambda m: make_adasum_optimizer(
            torch.optim.SGD(m.parameters(), lr=0.5), {p: n for n, p in m.named_parameters()},
            hvd.Compression.none, 1, 1.0, hvd.global_process_set))
        for b, p in zip(before, after):
            self.assertTrue(torch.allclose(p.detach(), b - 0.5 * p.grad), "one SGD step")


class TestNames(unittest.TestCase):
    def test_reachable_from_horovod(self):
        import horovod.torch as hvd_torch
        import horovod.torch.elastic as hvd_elastic
        for name in ("run", "State", "ObjectState", "TorchState", "ElasticSampler"):
            self.assertIs(getattr(hvd_elastic, name), getattr(elastic, name))
            self.assertIs(getattr(hvd_torch.elastic, name), getattr(hvd.elastic, name))


if __name__ == "__main__":
    unittest.main()
