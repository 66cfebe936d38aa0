"""Element-wise operations (NNEF 1.0.5 §4.2): unary, binary, ``select`` and the simplifiers.

Binary operations broadcast the NNEF way: shapes align from dimension 0 and the shorter one
is padded with *trailing* 1s (see :mod:`nnefx.ops._common`).
"""

from __future__ import annotations

from .registry import define

copy = define("copy", "elementwise", """
fragment copy<?>( x: tensor<?> ) -> ( y: tensor<?> );
""", generic=True)

#: Unary scalar functions, all ``( x: tensor<scalar> ) -> ( y: tensor<scalar> )``.
UNARY = ("neg", "rcp", "exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
         "atan", "asinh", "acosh", "atanh", "abs", "sign", "floor", "ceil", "round")
#: Binary arithmetic, ``scalar x scalar -> scalar``.
ARITHMETIC = ("add", "sub", "mul", "div", "pow")
#: Comparisons, ``scalar x scalar -> logical``.
COMPARISON = ("lt", "gt", "le", "ge", "eq", "ne")
#: Logical connectives, ``logical x logical -> logical``.
CONNECTIVE = ("and", "or")

UNARY_OPS = {name: define(name, "elementwise",
                          f"fragment {name}( x: tensor<scalar> ) -> ( y: tensor<scalar> );")
             for name in UNARY}

not_ = define("not", "elementwise", """
fragment not( x: tensor<logical> ) -> ( y: tensor<logical> );
""")

BINARY_OPS = {}
for _name in ARITHMETIC:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );")
for _name in COMPARISON:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );")
for _name in CONNECTIVE:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<logical>, y: tensor<logical> ) -> ( z: tensor<logical> );")

select = define("select", "elementwise", """
fragment select<?>( condition: tensor<logical>, true_value: tensor<?>, false_value: tensor<?> ) -> ( output: tensor<?> );
""", generic=True)

# --- simplifiers (compound) ---------------------------------------------------------------

sqr = define("sqr", "elementwise", """
fragment sqr( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ 2.0;
}
""", compound=True)

sqrt = define("sqrt", "elementwise", """
fragment sqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ 0.5;
}
""", compound=True)

rsqr = define("rsqr", "elementwise", """
fragment rsqr( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ -2.0;
}
""", compound=True)

rsqrt = define("rsqrt", "elementwise", """
fragment rsqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ -0.5;
}
""", compound=True)

log2 = define("log2", "elementwise", """
fragment log2( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = log(x) / log(2.0);
}
""", compound=True)

min_ = define("min", "elementwise", """
fragment min( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> )
{
    z = select(x < y, x, y);
}
""", compound=True)

max_ = define("max", "elementwise", """
fragment max( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> )
{
    z = select(x > y, x, y);
}
""", compound=True)

clamp = define("clamp", "elementwise", """
fragment clamp( x: tensor<scalar>, a: tensor<scalar>, b: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = max(min(x, b), a);
}
""", compound=True)
