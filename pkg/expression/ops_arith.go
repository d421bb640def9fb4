package expression

import "math"

// Arithmetic operators. Integers (int64) stay integers while the result is
// exact; an operation that would overflow int64, a division that does not
// divide evenly, or any float operand gives a float64.

func addNum(a, b number) number {
	if a.isInt && b.isInt {
		s := a.i + b.i
		if (a.i^s)&(b.i^s) >= 0 {
			return intNum(s)
		}
	}
	return floatNum(a.float() + b.float())
}

func subNum(a, b number) number {
	if a.isInt && b.isInt {
		d := a.i - b.i
		if (a.i^b.i)&(a.i^d) >= 0 {
			return intNum(d)
		}
	}
	return floatNum(a.float() - b.float())
}

func mulNum(a, b number) number {
	if a.isInt && b.isInt {
		if a.i == 0 || b.i == 0 {
			return intNum(0)
		}
		p := a.i * b.i
		if p/b.i == a.i && !(a.i == -1 && b.i == math.MinInt64) && !(b.i == -1 && a.i == math.MinInt64) {
			return intNum(p)
		}
	}
	return floatNum(a.float() * b.float())
}

func isZero(n number) bool {
	if n.isInt {
		return n.i == 0
	}
	return n.f == 0
}

// opAdd sums its operands (0 for none).
func opAdd(c *call, vs []any) (any, error) {
	sum := intNum(0)
	for i, v := range vs {
		n, _, ok := numberOf(v)
		if !ok {
			return nil, c.errorf("operand %d must be a number, got %s", i+1, typeName(v))
		}
		sum = addNum(sum, n)
	}
	return sum.value(), nil
}

// opMul multiplies its operands (1 for none).
func opMul(c *call, vs []any) (any, error) {
	prod := intNum(1)
	for i, v := range vs {
		n, _, ok := numberOf(v)
		if !ok {
			return nil, c.errorf("operand %d must be a number, got %s", i+1, typeName(v))
		}
		prod = mulNum(prod, n)
	}
	return prod.value(), nil
}

func opSub(c *call, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	return subNum(x, y).value(), nil
}

func (c *call) twoNumbers(a, b any) (number, number, error) {
	x, err := c.num(a, "argument 1")
	if err != nil {
		return number{}, number{}, err
	}
	y, err := c.num(b, "argument 2")
	if err != nil {
		return number{}, number{}, err
	}
	return x, y, nil
}

// opDiv divides; integers that divide evenly give an integer.
func opDiv(c *call, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	if isZero(y) {
		return nil, c.errorf("division by zero")
	}
	if x.isInt && y.isInt && x.i%y.i == 0 && !(x.i == math.MinInt64 && y.i == -1) {
		return x.i / y.i, nil
	}
	return x.float() / y.float(), nil
}

// opMod is the remainder of truncated division (the result has the sign of
// the dividend), math.Mod for floats.
func opMod(c *call, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	if isZero(y) {
		return nil, c.errorf("modulo by zero")
	}
	if x.isInt && y.isInt {
		if y.i == -1 {
			return int64(0), nil
		}
		return x.i % y.i, nil
	}
	return math.Mod(x.float(), y.float()), nil
}

func opNeg(c *call, v any) (any, error) {
	n, err := c.num(v, "argument")
	if err != nil {
		return nil, err
	}
	if !n.isInt {
		return -n.f, nil
	}
	return subNum(intNum(0), n).value(), nil
}

func opAbs(c *call, v any) (any, error) {
	n, err := c.num(v, "argument")
	if err != nil {
		return nil, err
	}
	if n.isInt {
		if n.i >= 0 {
			return n.i, nil
		}
		return subNum(intNum(0), n).value(), nil
	}
	return math.Abs(n.f), nil
}

func opFloor(c *call, v any) (any, error) { return c.round(v, math.Floor) }
func opCeil(c *call, v any) (any, error)  { return c.round(v, math.Ceil) }

// round applies f and returns an int64; a result outside the int64 range
// (or NaN) is an error.
func (c *call) round(v any, f func(float64) float64) (any, error) {
	n, err := c.num(v, "argument")
	if err != nil {
		return nil, err
	}
	if n.isInt {
		return n.i, nil
	}
	i, ok := floatToInt(f(n.f))
	if !ok {
		return nil, c.errorf("%s is out of the integer range", formatFloat(n.f))
	}
	return i, nil
}
