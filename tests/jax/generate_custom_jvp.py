"""Reference values for `custom_jvp` (tests/autodiff.rs): JAX's derivatives of functions
whose forward-mode rules differ from their true derivatives, so a value can only match where
ferrax uses the rule as JAX does: forward mode runs it, reverse mode transposes it, and
higher orders differentiate through both.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_custom_jvp.py > tests/jax/custom_jvp_reference.json
"""
import json

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


@jax.custom_jvp
def scaled_sin(x, y):
    return jnp.sin(x) * y


@scaled_sin.defjvp
def scaled_sin_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    # Not the true derivative: the x term is tripled and reads y squared.
    return scaled_sin(x, y), 3.0 * jnp.cos(x) * y * y * tx + jnp.sin(x) * ty


def loss(x, y):
    return jnp.sum(scaled_sin(x, y) * jnp.arange(1.0, x.size + 1.0).reshape(x.shape))


x = jnp.array([0.3, -1.2, 2.5])
y = jnp.array([1.5, 0.5, -2.0])
tx = jnp.array([1.0, -0.5, 0.25])
ty = jnp.array([0.0, 2.0, -1.0])
gx, gy = jax.grad(loss, argnums=(0, 1))(x, y)
_, tangent = jax.jvp(scaled_sin, (x, y), (tx, ty))
hessian_diag = jax.vmap(jax.grad(jax.grad(lambda a, b: scaled_sin(a, b), argnums=0), argnums=0))(x, y)
cross = jax.vmap(jax.grad(jax.grad(lambda a, b: scaled_sin(a, b), argnums=0), argnums=1))(x, y)
third = jax.vmap(jax.grad(jax.grad(jax.grad(lambda a, b: scaled_sin(a, b)))))(x, y)
per_example = jax.vmap(jax.grad(lambda a, b: scaled_sin(a, b) * 2.0))(x, y)

print(json.dumps({
    "jax": jax.__version__,
    "x": x.tolist(), "y": y.tolist(), "tx": tx.tolist(), "ty": ty.tolist(),
    "grad_x": gx.tolist(), "grad_y": gy.tolist(), "jvp": tangent.tolist(),
    "d2_dx2": hessian_diag.tolist(), "d2_dxdy": cross.tolist(), "d3_dx3": third.tolist(),
    "vmap_grad": per_example.tolist(),
}))
