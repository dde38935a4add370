package consumer

import "github.com/idemkit/idem"

type Config struct{ Engine *idem.Engine }

type Processor struct{}

func New(c Config, h any) (*Processor, error) { return nil, nil }
