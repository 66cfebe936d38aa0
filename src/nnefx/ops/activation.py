"""Activation functions (NNEF 1.0.5 §4.9.1, all compound) plus the Tools' ``softabs``.

``gelu`` is the spec's normative approximation ``x * sigmoid(1.702 * x)``, not the erf form.
"""

from __future__ import annotations

from .registry import define

sigmoid = define("sigmoid", "activation", """
fragment sigmoid( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = 1.0 / (1.0 + exp(-x));
}
""", compound=True)

relu = define("relu", "activation", """
fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = max(x, 0.0);
}
""", compound=True)

prelu = define("prelu", "activation", """
fragment prelu( x: tensor<scalar>, alpha: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = select(x < 0.0, alpha * x, x);
}
""", compound=True)

leaky_relu = define("leaky_relu", "activation", """
fragment leaky_relu( x: tensor<scalar>, alpha: scalar ) -> ( y: tensor<scalar> )
{
    y = prelu(x, alpha = alpha);
}
""", compound=True)

elu = define("elu", "activation", """
fragment elu( x: tensor<scalar>, alpha: scalar = 1.0 ) -> ( y: tensor<scalar> )
{
    y = select(x < 0.0, alpha * (exp(x) - 1.0), x);
}
""", compound=True)

selu = define("selu", "activation", """
fragment selu( x: tensor<scalar>, alpha: scalar = 1.67326319, lambda: scalar = 1.05070102 ) -> ( y: tensor<scalar> )
{
    y = lambda * select(x < 0.0, alpha * (exp(x) - 1.0), x);
}
""", compound=True)

gelu = define("gelu", "activation", """
fragment gelu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x * sigmoid(1.702 * x);
}
""", compound=True)

silu = define("silu", "activation", """
fragment silu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x * sigmoid(x);
}
""", compound=True)

softmax = define("softmax", "activation", """
fragment softmax( x: tensor<scalar>, axes: integer[] = [1] ) -> ( y: tensor<scalar> )
{
    m = max_reduce(x, axes = axes);
    e = exp(x - m);
    y = e / sum_reduce(e, axes = axes);
}
""", compound=True)

softplus = define("softplus", "activation", """
fragment softplus( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = log(exp(x) + 1.0);
}
""", compound=True)

# Not in any NNEF specification: shipped by the official tools' standard library, so
# documents written for them may use it.
softabs = define("softabs", "activation", """
fragment softabs( x: tensor<scalar>, epsilon: scalar ) -> ( y: tensor<scalar> )
{
    y = sqrt(sqr(x) + epsilon);
}
""", compound=True, tools_only=True)
