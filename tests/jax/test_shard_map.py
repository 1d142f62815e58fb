"""shard_map of rms_norm over 4 host devices. XLA reads the device count when jax first
starts a backend, so the check runs in a fresh interpreter with XLA_FLAGS set before it
imports jax."""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import packfn.jax as pj

    assert len(jax.devices("cpu")) == 4, jax.devices()
    mesh = jax.make_mesh((4,), ("rows",))

    def rms_norm(x):
        return pj.ffi_call("packfn.kernels.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, eps=1e-5)

    x = jnp.asarray(np.random.default_rng(3).normal(size=(16, 32)).astype(np.float32))
    x = jax.device_put(x, NamedSharding(mesh, P("rows")))
    f = jax.jit(jax.shard_map(rms_norm, mesh=mesh, in_specs=P("rows"), out_specs=P("rows")))
    out = f(x)
    ref = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert len(out.sharding.device_set) == 4
    # each device ran the kernel on its own rows: shapes seen per shard are (4, 32)
    shapes = {s.data.shape for s in out.addressable_shards}
    assert shapes == {(4, 32)}, shapes
    print("ok", len(out.addressable_shards))
    """
)


def test_shard_map_over_four_host_devices():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    env["JAX_PLATFORMS"] = "cpu"
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["ok", "4"]
