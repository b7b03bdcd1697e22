"""Face and licence-plate detectors, found by name through :data:`DETECTORS` (config ``anonymize.detector``).

A detector is one module with a class implementing :class:`senri.anonymize.detectors.base.Detector` plus
one ``DETECTORS.register`` line here.
"""

from senri.registry import Registry

DETECTORS = Registry("detector")
DETECTORS.register("centerface", "senri.anonymize.detectors.centerface:CenterFace")
DETECTORS.register("egoblur", "senri.anonymize.detectors.egoblur:EgoBlur")
DETECTORS.register("plates", "senri.anonymize.detectors.plates:Plates")
