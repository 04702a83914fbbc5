"""Reading YAML that koordpy did not write (scenarios, configuration files, ConfigMaps): the parsers
it is read with and the bounds it is held to before it is composed, the same whichever PyYAML is
installed. Below both worlds, so that the simulator and the cluster read YAML alike."""
