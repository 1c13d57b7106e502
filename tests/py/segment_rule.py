#!/usr/bin/env python3
"""Which S3 keys invoke the materializer, as the deployed rule would decide.

    segment_rule.py TEMPLATE SAMPLE_EVENT '{"Parameter": "value", ...}' '[["bucket", "key"], ...]'

The SAM template is translated by SAM's own translator (as `sam validate` and
CloudFormation's transform do), the materializer's AWS::Events::Rule is taken from the
result, its pattern is resolved for the given parameters by SAM CLI's intrinsic resolver
(Ref, Fn::Sub, Fn::If over the template's conditions), and each key's "Object Created"
event (SAMPLE_EVENT with that key, URL-encoded as S3 sends it) is matched by moto's
EventBridge pattern matcher. Prints {"pattern": <resolved pattern>, "matched": {key: bool}}.
"""
import json
import sys
import urllib.parse

from moto.events.models import EventPattern
from samcli.lib.intrinsic_resolver.intrinsic_property_resolver import IntrinsicResolver
from samcli.lib.intrinsic_resolver.intrinsics_symbol_table import IntrinsicsSymbolTable
from samcli.lib.translate.sam_template_validator import SamTemplateValidator
from samcli.yamlhelper import yaml_parse


def materializer_pattern(template_path, parameters):
    with open(template_path) as f:
        template = yaml_parse(f.read())
    validator = SamTemplateValidator(template, None, region="us-east-1", parameter_overrides=parameters)
    translated = yaml_parse(validator.get_translated_template_if_valid())
    rules = [
        resource["Properties"]
        for resource in translated["Resources"].values()
        if resource["Type"] == "AWS::Events::Rule"
        and any(t["Arn"] == {"Fn::GetAtt": ["MaterializerFunction", "Arn"]} for t in resource["Properties"]["Targets"])
    ]
    assert len(rules) == 1, f"one rule invokes the materializer, not {len(rules)}"
    symbols = IntrinsicsSymbolTable(template=translated, logical_id_translator=parameters)
    resolver = IntrinsicResolver(template=translated, symbol_resolver=symbols)
    return resolver.intrinsic_property_resolver(rules[0]["EventPattern"], ignore_errors=False)


def main():
    template_path, event_path, parameters, objects = sys.argv[1:5]
    parameters, objects = json.loads(parameters), json.loads(objects)
    pattern = materializer_pattern(template_path, parameters)
    matcher = EventPattern.load(json.dumps(pattern))
    with open(event_path) as f:
        sample = json.load(f)
    matched = []
    for bucket, key in objects:
        event = json.loads(json.dumps(sample))
        event["detail"]["bucket"]["name"] = bucket
        event["resources"] = [f"arn:aws:s3:::{bucket}"]
        event["detail"]["object"]["key"] = urllib.parse.quote_plus(key, safe="/")
        matched.append(matcher.matches_event(event))
    print(json.dumps({"pattern": pattern, "matched": matched}))


if __name__ == "__main__":
    main()
