import ast

import pytest

from jobaware.resource.python2 import repair


@pytest.mark.parametrize("source, expected", [
    ("print 'a', b\n", "print( 'a', b)\n"),
    ("print\n", "print()\n"),
    ("print >>sys.stderr, 'x', y\n", "print('x', y, file=sys.stderr)\n"),
    ("print >>f\n", "print(file=f)\n"),
    ("if x: print y  # note\n", "if x: print( y)  # note\n"),
    ("print x,\n", "print( x,)\n"),
    ("exec code in ns\n", "exec( code , ns)\n"),
    ("try:\n    pass\nexcept IOError, e:\n    pass\n", "try:\n    pass\nexcept IOError as e:\n    pass\n"),
    ("raise ValueError, 'bad'\n", "raise ValueError( 'bad')\n"),
    ("x = `y`\n", "x = repr(y)\n"),
    ("if a <> b: pass\n", "if a != b: pass\n"),
    ("n = 0777 + 10L\n", "n = 0o777 + 10\n"),
    ("s = ur'abc'\n", "s = r'abc'\n"),
])
def test_python2_statements_become_python3(source, expected):
    assert repair(source) == expected
    ast.parse(expected)


def test_mixed_tabs_are_expanded_as_python2_read_them():
    source = "def f():\n\tif x:\n\t\treturn 1\n        return 2\n"
    with pytest.raises(SyntaxError):
        ast.parse(source)
    ast.parse(repair(source))


def test_python3_is_left_alone():
    assert repair("print('x')\nprint = 3\nx = print.__name__\n") is None
    assert repair("except_ = 1\n") is None
