// Package celkro is kro's CEL environment as dcontroller evaluates it: the
// CEL standard library, cel-go's extensions that kro enables, the Kubernetes
// CEL libraries kro includes and kro's own functions (hash.*, json.*,
// random.*, merge, deepMerge, lists.*AtIndex, omit), each giving the values
// kro gives for the same arguments. It sits below pkg/expression, whose
// @cel operator evaluates with it when asked for the "kro" library, and
// pkg/rgd, which compiles ResourceGraphDefinition expressions with it; it
// knows nothing of either.
package celkro
