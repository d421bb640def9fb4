package expression

import "math"

// Arithmetic operators. Integers (int64) stay integers while the result is
// exact; an operation that would overflow int64, a division that does not
// divide evenly, or any float operand gives a float64. A float64 result
// that is not finite (NaN or ±Inf: an overflow past ±1.8e308) is an error,
// see finite.

// nonFiniteHint says why a NaN or ±Inf result is refused.
const nonFiniteHint = "JSON (RFC 8259 §6) and the Kubernetes API have no NaN or Infinity"

// finite returns the value of n, or an error when n is a NaN or ±Inf
// float: JSON cannot carry it, so no object holding it can be written or
// listed.
func (c *call) finite(n number) (any, error) {
	if !n.isInt && (math.IsNaN(n.f) || math.IsInf(n.f, 0)) {
		return nil, c.errorf("result %s is not a finite number (%s)", formatFloat(n.f), nonFiniteHint)
	}
	return n.value(), nil
}

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
	return c.finite(sum)
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
	return c.finite(prod)
}

func opSub(c *call, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	return c.finite(subNum(x, y))
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
	return c.finite(floatNum(x.float() / y.float()))
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
	return c.finite(floatNum(math.Mod(x.float(), y.float())))
}

func opNeg(c *call, v any) (any, error) {
	n, err := c.num(v, "argument")
	if err != nil {
		return nil, err
	}
	if !n.isInt {
		return c.finite(floatNum(-n.f))
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
	return c.finite(floatNum(math.Abs(n.f)))
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
