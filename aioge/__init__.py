"""aioge"""
